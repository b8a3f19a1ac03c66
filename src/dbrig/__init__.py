"""dbrig: benchmark orchestrator for MySQL and MariaDB."""

__version__ = "0.1.0"
