"""Development tools that are not part of the running site: the scripted OpenAI-compatible
model used by the tests, the benchmarks and `manage.py fake_llm`, and `make vendor`
(vendor.py) which fetches the pinned browser libraries. Standard library only, so a
production install (requirements.txt) can import them."""
