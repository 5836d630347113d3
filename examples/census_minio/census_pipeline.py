"""Seed 004's census pipeline (KFP v2 + MinIO), run by millpond against any S3 endpoint.

The pipeline checks object storage for a Census table; when it is missing it "downloads" it
(here from ``acs5_2020_counties.csv``, a 50-row stand-in for api.census.gov that answers the
same ``get=group(TABLE)`` question) and saves it to the bucket; when it is there it reads it
back. The branch is a ``dsl.Condition`` as in the seed; the pipeline's output is whichever
branch produced the table (``dsl.OneOf``, which kfp 2.x needs to return a value from a branch).

The S3 endpoint and keys reach the components through a millpond secret (kfp-kubernetes
``use_secret_as_env``), created once with::

    millpond secret create census-s3 --from-literal AWS_ENDPOINT_URL=http://127.0.0.1:8333 \
        --from-literal AWS_ACCESS_KEY_ID=... --from-literal AWS_SECRET_ACCESS_KEY=...

Submit it to a running ``millpond server`` with::

    python examples/census_minio/census_pipeline.py --host http://127.0.0.1:8888 --bucket census-data

The components use ``s3fs`` and the standard library only (``packages_to_install`` stays empty,
so no network is needed): they run in millpond's own interpreter.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import argparse
import sys
from pathlib import Path

from kfp import dsl, kubernetes
from kfp.dsl import Dataset, Input, Output

HERE = Path(__file__).resolve().parent
CENSUS_CSV = HERE / "acs5_2020_counties.csv"
SECRET = "census-s3"
_S3_ENV = {key: key for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}


@dsl.component
def table_data_exists(bucket: str, table_code: str, year: int) -> bool:
    """Check for the existence of Census table data in object storage."""
    import logging
    import os

    import s3fs

    logging.basicConfig(level=logging.INFO)
    logger = logging.getLogger("kfp_logger")
    object_name = f"{table_code}-{year}.csv"
    fs = s3fs.S3FileSystem(key=os.environ["AWS_ACCESS_KEY_ID"], secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                           endpoint_url=os.environ["AWS_ENDPOINT_URL"], client_kwargs={"region_name": "us-east-1"})
    if not fs.exists(bucket):
        logger.info("bucket %s does not exist", bucket)
        return False
    found = fs.exists(f"{bucket}/{object_name}")
    logger.info("%s/%s %s", bucket, object_name, "found" if found else "not found")
    return found


@dsl.component
def download_table_data(dataset: str, table_code: str, year: int, census_api: str, table_df: Output[Dataset]):
    """All fields of the table, for every county, saved as CSV.

    ``census_api`` stands in for https://api.census.gov/data/{year}/{dataset}: a CSV file
    whose columns are the fields; like ``get=group(TABLE)&for=county:*`` this keeps the
    table's columns (``TABLE_...``) and the geography ones.
    """
    import csv
    import logging

    logging.basicConfig(level=logging.INFO)
    logger = logging.getLogger("kfp_logger")
    logger.info("GET %s?get=group(%s)&for=county:* (dataset %s, year %d)", census_api, table_code, dataset, year)
    with open(census_api, newline="") as source:
        rows = list(csv.reader(source))
    header, data = rows[0], rows[1:]
    keep = [
        i for i, name in enumerate(header)
        if name.startswith(f"{table_code}_") or name in ("GEO_ID", "NAME", "state", "county")
    ]
    if not any(header[i].startswith(f"{table_code}_") for i in keep):
        raise ValueError(f"unknown table {table_code!r}")
    with open(table_df.path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow([header[i] for i in keep])
        writer.writerows([[row[i] for i in keep] for row in data])
    logger.info("Table %s for %d has been downloaded: %d rows.", table_code, year, len(data))


@dsl.component
def save_table_data(bucket: str, table_code: str, year: int, table_df: Input[Dataset]):
    """Save the table to the bucket (made when missing)."""
    import logging
    import os

    import s3fs

    logging.basicConfig(level=logging.INFO)
    logger = logging.getLogger("kfp_logger")
    object_name = f"{table_code}-{year}.csv"
    fs = s3fs.S3FileSystem(key=os.environ["AWS_ACCESS_KEY_ID"], secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                           endpoint_url=os.environ["AWS_ENDPOINT_URL"], client_kwargs={"region_name": "us-east-1"})
    if not fs.exists(bucket):
        logger.info("Creating bucket: %s.", bucket)
        fs.mkdir(bucket)
    fs.put_file(table_df.path, f"{bucket}/{object_name}")
    with open(table_df.path) as saved:
        rows = sum(1 for _ in saved) - 1
    logger.info("%s successfully uploaded to bucket %s (%d rows).", object_name, bucket, rows)


@dsl.component
def get_table_data(bucket: str, table_code: str, year: int, table_df: Output[Dataset]):
    """Read the table back from the bucket."""
    import logging
    import os

    import s3fs

    logging.basicConfig(level=logging.INFO)
    logger = logging.getLogger("kfp_logger")
    object_name = f"{table_code}-{year}.csv"
    fs = s3fs.S3FileSystem(key=os.environ["AWS_ACCESS_KEY_ID"], secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                           endpoint_url=os.environ["AWS_ENDPOINT_URL"], client_kwargs={"region_name": "us-east-1"})
    fs.get_file(f"{bucket}/{object_name}", table_df.path)
    with open(table_df.path) as read:
        rows = sum(1 for _ in read) - 1
    logger.info("Object: %s has been retrieved from bucket: %s (%d rows).", object_name, bucket, rows)


def _with_s3(task: dsl.PipelineTask) -> dsl.PipelineTask:
    return kubernetes.use_secret_as_env(task, secret_name=SECRET, secret_key_to_env=_S3_ENV)


@dsl.pipeline(name="census-pipeline", description="Pipeline that will download Census data and save to object storage.")
def census_pipeline(bucket: str, dataset: str, table_code: str, year: int, census_api: str) -> Dataset:
    exists = _with_s3(table_data_exists(bucket=bucket, table_code=table_code, year=year))

    with dsl.Condition(exists.output == False):  # noqa: E712 - KFP builds the condition from `==`; `not` cannot
        downloaded = download_table_data(dataset=dataset, table_code=table_code, year=year, census_api=census_api)
        _with_s3(save_table_data(
            bucket=bucket, table_code=table_code, year=year, table_df=downloaded.outputs["table_df"]
        ))

    with dsl.Else():
        fetched = _with_s3(get_table_data(bucket=bucket, table_code=table_code, year=year))

    return dsl.OneOf(downloaded.outputs["table_df"], fetched.outputs["table_df"])


def submit(host: str, bucket: str, table_code: str = "B01001", year: int = 2020,
           experiment: str = "Implementing functions", token: str | None = None,
           pipeline_root: str | None = None) -> str:
    """Start a run as the seed does (caching off, so the existence check runs each time); its id.

    ``pipeline_root`` (``s3://BUCKET/runs``) is where the run's artifacts go: on a server in cluster
    mode (``millpond server --ray``) it must be one every node reaches."""
    import kfp

    client = kfp.Client(host=host, existing_token=token)
    run = client.create_run_from_pipeline_func(
        census_pipeline, experiment_name=experiment, enable_caching=False,
        arguments={"bucket": bucket, "dataset": "acs/acs5", "table_code": table_code, "year": year,
                   "census_api": str(CENSUS_CSV)},
        pipeline_root=pipeline_root,
    )
    return run.run_id  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    import kfp

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="http://127.0.0.1:8888")
    parser.add_argument("--bucket", default="census-data")
    parser.add_argument("--table-code", default="B01001")
    parser.add_argument("--year", type=int, default=2020)
    parser.add_argument("--experiment", default="Implementing functions")
    parser.add_argument("--token", default=None)
    parser.add_argument("--pipeline-root", default=None, help="s3://BUCKET/PREFIX (needed on a Ray cluster)")
    args = parser.parse_args(argv)
    run_id = submit(args.host, args.bucket, args.table_code, args.year, args.experiment, args.token,
                    args.pipeline_root)
    client = kfp.Client(host=args.host, existing_token=args.token)
    run = client.wait_for_run_completion(run_id, timeout=600)
    print(f"run {run_id}: {run.state}")
    for task in sorted(run.run_details.task_details or [], key=lambda t: t.create_time):
        print(f"  {task.display_name:<24} {task.state}")
    return 0 if run.state == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
