-- Minutes of completed visits per calendar month.
select
    date_trunc('month', visited_on) as visit_month,
    count(*) as visits,
    sum(minutes) as minutes
from {{ ref('raw_visits') }}
where outcome = 'completed'
group by 1
