"""L2 session search (Hermes reference §4–6).

- `sanitize`: the FTS5 query sanitiser and the parsed query structure.
- `backends`: routing (word index / trigram / LIKE) and the SQL per vendor.
- `hits`: hits and highlighted snippets.
- `transcript`: transcript format and the window around the matches.
- `summarise`: cached query-focused summaries (Celery task body, bounded waiting).
- `service`: what the tool, the API and the Sessions page call.
- `tool`: the agent's `session_search` tool (registered from SessionsAppConfig.ready()).

Import from `sessions_app.search.service` (kept out of this module so importing the
package stays cheap and free of cycles).
"""
