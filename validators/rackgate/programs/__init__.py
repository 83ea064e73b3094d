"""Programs rackgate runs somewhere else than in its own process: the Redfish collector
(control host), the cooling exporter (installed by the cooling_telemetry role) and the
probes sent as text to nodes and launch hosts."""
