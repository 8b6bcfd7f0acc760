-- The loan log keeps every state change; the latest row of each loan is its current state.
with log as (

    select
        *,
        row_number() over (
            partition by loan_id
            order by recorded_at desc
        ) as recency
    from {{ ref('raw_loan_events') }}

)

select
    loan_id,
    member_id,
    item_id,
    branch_id,
    cast(checked_out_at as date) as checkout_date,
    cast(checked_out_at as date) + loan_days as due_date,
    cast(returned_at as date) as return_date,
    lower(loan_status) as loan_status
from log
where recency = 1
