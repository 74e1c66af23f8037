"""Tasks: one module per task family, discovered by import (see bench.core.registry)."""
