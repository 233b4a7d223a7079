#!/bin/sh
# Runs once, when PostgreSQL starts on an empty data volume (the image's /docker-entrypoint-initdb.d hook): two
# databases, each owned by its own login role, so the service and MLflow cannot read or break each other's tables.
#   scalesweep - the REST service's sweep records (api/service/_db.py; Alembic migrates it at service start)
#   mlflow     - MLflow's backend store (the MLflow server creates its schema at first start)
# Passwords go in as psql variables (:'name' quotes them), never spliced into SQL by the shell.
# Changing SWEEPS_DB_PASSWORD or MLFLOW_DB_PASSWORD later needs ALTER ROLE: this script does not run again.
set -eu
: "${SWEEPS_DB_PASSWORD:?SWEEPS_DB_PASSWORD is not set}"
: "${MLFLOW_DB_PASSWORD:?MLFLOW_DB_PASSWORD is not set}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v sweeps_password="$SWEEPS_DB_PASSWORD" -v mlflow_password="$MLFLOW_DB_PASSWORD" <<'SQL'
CREATE ROLE scalesweep LOGIN PASSWORD :'sweeps_password';
CREATE DATABASE scalesweep OWNER scalesweep;
REVOKE ALL ON DATABASE scalesweep FROM PUBLIC;
CREATE ROLE mlflow LOGIN PASSWORD :'mlflow_password';
CREATE DATABASE mlflow OWNER mlflow;
REVOKE ALL ON DATABASE mlflow FROM PUBLIC;
SQL
