"""The demo rack: podman containers as nodes and simulated BMCs (ipmi_sim, Redfish) on
loopback, for ``rackgate demo`` and the end-to-end tests."""
