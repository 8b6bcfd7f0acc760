-- Loans per branch and calendar month, with how many different members borrowed and how
-- many of those loans came back late.
with loans as (

    select
        *,
        date_trunc('month', checkout_date) as circulation_month
    from {{ ref('fct_loans') }}

)

select
    branches.branch_id,
    branches.branch_name,
    loans.circulation_month,
    count(*) as loans,
    count(distinct loans.member_id) as borrowers,
    sum(case when loans.return_state = 'late' then 1 else 0 end) as late_returns
from loans
inner join {{ ref('raw_branches') }} as branches
    on loans.branch_id = branches.branch_id
group by branches.branch_id, branches.branch_name, loans.circulation_month
