"""The nftables backend, through libnftables in-process."""
