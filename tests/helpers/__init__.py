"""Helpers shared by the unit and the integration tests (``from tests.helpers.x import y``)."""
