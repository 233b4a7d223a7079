#!/usr/bin/env python3
"""Container health check: exit 0 when every URL given answers 2xx within the timeout, else 1.

    scalesweep-healthcheck http://127.0.0.1:8000/v1/health [URL ...]

The slim image has no curl; the standard library is enough and starts in about 50 ms.
"""

from __future__ import annotations

import sys
import urllib.request

TIMEOUT_S = 4.0  # below compose's healthcheck timeout (5 s), so a slow answer reads as a failure, not a hang


def main(urls: list[str]) -> int:
    if not urls:
        print("usage: scalesweep-healthcheck URL [URL ...]", file=sys.stderr)
        return 2
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                if not 200 <= response.status < 300:
                    print(f"{url}: HTTP {response.status}", file=sys.stderr)
                    return 1
        except Exception as exc:  # any failure to answer is "unhealthy", reported in `docker inspect`
            print(f"{url}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
