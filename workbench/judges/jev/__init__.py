"""Hosted JEV: its payloads, HTTP client, judgment cache, and a Jev-protocol judge server."""
