"""The admin subcommands of ``kefu`` that edit a data dir (``kb``, ``cache``, ``keys``).

They sit above the packages whose files they edit, next to ``kefu/cli.py``, because they
read the settings (``--data-dir``'s default) and may reach Redis (``keys --redis``)."""
