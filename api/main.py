"""The service's app factory under its historical name: it lives in `api.service` (`api.create_app`)."""

from .service.app import create_app

__all__ = ["create_app"]
