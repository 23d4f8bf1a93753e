"""The suite cannot reach the network: pytest-socket is on, and this proves it is live."""

import socket

import pytest
from pytest_socket import SocketConnectBlockedError


def test_a_connection_to_the_internet_is_refused_before_it_leaves_the_process():
    # If the block were off this would be an OSError (a timeout, or no route), not this.
    with pytest.raises(SocketConnectBlockedError):
        socket.create_connection(("192.0.2.1", 443), timeout=1)


def test_loopback_stays_open_for_local_fake_servers():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port), timeout=1)
        client.close()
    finally:
        server.close()
