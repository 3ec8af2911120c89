"""The BlobStore on S3 and S3-compatible object stores (MinIO, SeaweedFS, Ceph RGW, R2):
`sigv4.py` signs requests, `client.py` is the handful of S3 operations the store needs,
`settings.py` reads the bucket URI and the AWS environment, `blob_store.py` is the store."""
