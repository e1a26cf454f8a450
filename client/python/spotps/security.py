"""Channels to the shards: plaintext, TLS or mutual TLS, and the bearer token.

Mirrors common/channel_security.h: TLS when a CA is given, a client
certificate for shards under mTLS, and "authorization: Bearer <token>" on
every call -- added by an interceptor, so plaintext loopback setups carry the
token as well (gRPC's call credentials would need TLS).
"""

import grpc


class ChannelSecurity:
    """PEM bytes and token; all optional. The default is plaintext, no token."""

    def __init__(self, ca_pem=None, cert_pem=None, key_pem=None, token=None):
        if (cert_pem is None) != (key_pem is None):
            raise ValueError("a client certificate needs its key, and the key its certificate")
        if cert_pem is not None and ca_pem is None:
            raise ValueError("a client certificate needs the CA (TLS) as well")
        if token is not None and not (16 <= len(token) <= 256 and token.isprintable()
                                      and " " not in token):
            raise ValueError("a token is 16 to 256 printable characters without spaces")
        self.ca_pem = ca_pem
        self.cert_pem = cert_pem
        self.key_pem = key_pem
        self.token = token

    @classmethod
    def from_files(cls, ca_file=None, cert_file=None, key_file=None, token_file=None):
        def read(path):
            if path is None:
                return None
            with open(path, "rb") as f:
                return f.read()

        token = None
        if token_file is not None:
            with open(token_file) as f:
                lines = [l.strip() for l in f if l.strip() and not l.lstrip().startswith("#")]
            if not lines:
                raise ValueError(f"{token_file} holds no token")
            token = lines[0]
        return cls(read(ca_file), read(cert_file), read(key_file), token)

    def channel(self, address, options):
        if self.ca_pem is None:
            channel = grpc.insecure_channel(address, options=options)
        else:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=self.ca_pem, private_key=self.key_pem,
                certificate_chain=self.cert_pem)
            channel = grpc.secure_channel(address, credentials, options=options)
        if self.token is None:
            return channel
        return grpc.intercept_channel(channel, _BearerToken(self.token))


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                   grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    def __init__(self, token):
        self._metadata = ("authorization", f"Bearer {token}")

    def _with_token(self, details):
        return _CallDetails(details, list(details.metadata or []) + [self._metadata])

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._with_token(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._with_token(details), request_iterator)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, details, metadata):
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = metadata
        self.credentials = details.credentials
        self.wait_for_ready = getattr(details, "wait_for_ready", None)
        self.compression = getattr(details, "compression", None)
