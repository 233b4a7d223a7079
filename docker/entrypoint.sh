#!/bin/sh
# Entrypoint of the scalesweep image: refuse to start with a secret still set to docker/.env.example's placeholder,
# then replace itself with the command (compose's `init: true` puts tini above it as PID 1, which forwards signals
# and reaps the daemons `ray start` leaves behind).
set -eu

placeholders=$(env | grep -o '^[A-Za-z_][A-Za-z0-9_]*=.*CHANGE_ME' | cut -d= -f1 || true)
if [ -n "$placeholders" ]; then
    for name in $placeholders; do
        echo "scalesweep: $name still holds the CHANGE_ME placeholder of docker/.env.example;" \
             "generate real secrets first (docker/README.md, 'Secrets')" >&2
    done
    exit 64
fi

exec "$@"
