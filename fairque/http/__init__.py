"""The JQ master and the HTTP worker: HTTP + MessagePack + OpenAPI."""
