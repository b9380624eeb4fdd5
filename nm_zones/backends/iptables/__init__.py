"""The legacy x_tables backend, through python-iptables."""
