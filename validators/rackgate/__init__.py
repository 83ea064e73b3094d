"""rackgate: acceptance validation for GPU training racks.

The pipeline is collect -> parse -> judge -> report (see ARCHITECTURE.md):
``collect`` stores raw evidence, ``parsers`` turn it into typed records,
``checks`` judge records against a hardware ``profile``, ``reports`` write
JSON and HTML. Missing or unparseable evidence is always ``error``.
"""

__version__ = "0.1.0"
