-- Attended and missed visits make up every visit of the week.
select *
from {{ ref('clinician_weekly_load') }}
where attended + missed != visits
