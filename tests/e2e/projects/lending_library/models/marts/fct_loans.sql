-- One row per loan that happened (cancelled loans are dropped), with the item's format,
-- how the loan ended relative to its due date, and the fines it drew.
with loans as (

    select * from {{ ref('stg_loans') }}
    where loan_status != 'cancelled'

),

fines as (

    select
        loan_id,
        sum(fine_amount) as fines_assessed,
        sum(case when fine_status = 'open' then fine_amount else 0 end) as fines_open
    from {{ ref('stg_fines') }}
    where fine_status != 'waived'
    group by loan_id

)

select
    loans.loan_id,
    loans.member_id,
    loans.item_id,
    loans.branch_id,
    loans.checkout_date,
    loans.due_date,
    loans.return_date,
    loans.loan_status,
    items.item_format,
    case
        when loans.return_date > loans.due_date then 'late'
        when loans.return_date is not null then 'on_time'
        when loans.loan_status = 'lost' then 'lost'
        else 'out'
    end as return_state,
    coalesce(fines.fines_assessed, 0) as fines_assessed,
    coalesce(fines.fines_open, 0) as fines_open
from loans
left join {{ ref('stg_items') }} as items
    on loans.item_id = items.item_id
left join fines
    on loans.loan_id = fines.loan_id
