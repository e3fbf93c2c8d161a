"""The lab: Kiln's embedded default cluster, real systemd nodes in podman on one machine."""
