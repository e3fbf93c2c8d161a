"""What Kiln reads from and writes for Prometheus besides the monitoring role's files
(kiln.roles.monitoring): `kiln monitoring show` (show) and the campaigns' results as
metrics (results)."""
