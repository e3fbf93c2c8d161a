"""Monitoring of the cluster (the monitoring role, docs/monitoring.md): Prometheus's
alert rules, Grafana's dashboards and Prometheus's console pages, all built from one
query library over kiln_node.metrics' catalogue; the role's settings as `kiln inventory
check` judges them; and `kiln monitoring show`, read from Prometheus's HTTP API."""
