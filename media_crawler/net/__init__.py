"""Every request the crawler makes passes one URL policy (net/policy.py).

targets.py parses a URL strictly, once; addresses.py says which addresses are
internal; policy.py decides what a source, a platform or a feed may reach;
pinning.py makes the connection go to exactly the address the policy checked.
"""
