-- a modest table that is still over a small per-relation row limit
select range as n from range(5000)
