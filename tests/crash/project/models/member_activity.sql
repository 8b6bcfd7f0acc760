-- One row per non-staff member (unknown staff flag counts as a member) with
-- their completed visits and the minutes spent in them.
with completed as (

    select
        member_id,
        count(*) as completed_visits,
        sum(coalesce(minutes, 0)) as completed_minutes
    from {{ ref('raw_visits') }}
    where outcome = 'completed'
    group by member_id

)

select
    m.member_id,
    m.member_name,
    coalesce(c.completed_visits, 0) as completed_visits,
    coalesce(c.completed_minutes, 0) as completed_minutes
from {{ ref('raw_members') }} as m
left join completed as c
    on m.member_id = c.member_id
where coalesce(m.is_staff, false) = false
