"""The JQ master and the HTTP worker (seed 003): HTTP + MessagePack + OpenAPI."""
