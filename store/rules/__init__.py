"""The store's rules as pure functions: who may see what, which submissions a quota charges,
when an image is due for removal, which sets a backfill covers, which live model answers
next. The store's modules build their SQL from these; nothing here touches a database
(an import contract keeps it so), so each rule has table-driven tests without one."""
