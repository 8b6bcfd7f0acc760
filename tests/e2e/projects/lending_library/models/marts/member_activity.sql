-- Members of the public (staff excluded) with their borrowing over the last 60 days and
-- what they still owe; blocked members owe 5 or more in open fines.
with members as (

    select * from {{ ref('stg_members') }}
    where not is_staff

),

recent as (

    select
        member_id,
        count(*) as recent_loans,
        count(distinct item_id) as recent_titles,
        max(checkout_date) as last_checkout_date
    from {{ ref('fct_loans') }}
    where checkout_date >= current_date - interval 60 day
    group by member_id

),

owed as (

    select
        member_id,
        sum(fines_open) as fines_open
    from {{ ref('fct_loans') }}
    group by member_id

)

select
    members.member_id,
    members.member_name,
    members.membership_tier,
    coalesce(recent.recent_loans, 0) as recent_loans,
    coalesce(recent.recent_titles, 0) as recent_titles,
    recent.last_checkout_date,
    coalesce(owed.fines_open, 0) as fines_open,
    case
        when coalesce(owed.fines_open, 0) >= 5 then 'blocked'
        when recent.member_id is not null then 'active'
        else 'lapsed'
    end as borrowing_status
from members
left join recent
    on members.member_id = recent.member_id
left join owed
    on members.member_id = owed.member_id
