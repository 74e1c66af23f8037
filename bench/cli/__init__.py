"""The command line (``bench``): it parses and prints, the engine does the work.

``main`` builds the app, ``commands`` holds one module per command, ``common`` what they share. A command imports the
engine when it runs, so ``bench list`` and ``--help`` load none of it.
"""
