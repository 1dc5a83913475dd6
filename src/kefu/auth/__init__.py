"""Who is calling: API keys, JWT bearer tokens, the web page's short-lived token, and scopes."""
