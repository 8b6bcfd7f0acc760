-- Per clinician and ISO week: visits attended, visits missed, minutes of care booked
-- and the share of visits missed.
with visits as (

    select
        *,
        date_trunc('week', visit_date) as visit_week
    from {{ ref('fct_visits') }}

),

weekly as (

    select
        clinician_id,
        visit_week,
        count(*) as visits,
        sum(case when appointment_status = 'completed' then 1 else 0 end) as attended,
        sum(case when appointment_status = 'no_show' then 1 else 0 end) as missed,
        sum(duration_minutes) as booked_minutes
    from visits
    group by clinician_id, visit_week

)

select
    clinician_id,
    visit_week,
    visits,
    attended,
    missed,
    booked_minutes,
    round(missed / visits, 3) as no_show_rate
from weekly
