"""Running the code location for real: the workers knob, the Dagster processes, their instance."""
