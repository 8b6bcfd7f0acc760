-- A loan on the overdue list is overdue by at least one day.
select *
from {{ ref('overdue_loans') }}
where days_overdue < 1
