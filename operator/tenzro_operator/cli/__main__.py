"""``python -m tenzro_operator.cli``: the ``tenzro`` command."""

from tenzro_operator.cli.main import main

main()
