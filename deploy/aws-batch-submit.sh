#!/bin/sh
# Runs deploy/aws-batch-job.json as an AWS Batch array job of 16 children.
# Each child gets AWS_BATCH_JOB_ARRAY_INDEX (0..15) as its --task-index;
# the size here must equal the job's --task-count. The last child to finish
# merges the manifest parts into manifest.json; a retried child resumes.
# The job role needs s3:ListBucket and s3:GetObject on the source bucket,
# and s3:ListBucket, s3:GetObject, s3:PutObject and s3:DeleteObject on the
# destination's.
set -eu
QUEUE=${QUEUE:-prep-queue}
aws batch register-job-definition --cli-input-json file://deploy/aws-batch-job.json
aws batch submit-job --job-name prep-convert --job-queue "$QUEUE" \
  --job-definition prep-convert --array-properties size=16
