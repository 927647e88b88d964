"""What every part of the build side uses: errors and exit codes, flag values, names, output,
logging, YAML reading and Jinja2 templating."""
