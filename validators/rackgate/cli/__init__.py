"""rackgate's command line: one module per subcommand, each with its ``register`` (the
parser) and its function; ``main`` builds the parser and runs a command. Importing this
package imports nothing else: ``rackgate healthcheck`` (``programs.healthcheck``) uses
``cli.common`` on nodes that have only the standard library and PyYAML."""
