-- attack: a recursive CTE with no stop condition
with recursive counter(n) as (
    select 1
    union all
    select n + 1 from counter
)
select max(n) as n from counter
