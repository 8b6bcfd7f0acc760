-- Items still out past their due date (lost items are written off, not chased), with the
-- fine accrued so far: a quarter a day for books, half for audiobooks, one for discs.
select
    loan_id,
    member_id,
    item_id,
    item_format,
    due_date,
    current_date - due_date as days_overdue,
    (current_date - due_date) * case
        when item_format = 'dvd' then 1.00
        when item_format = 'audiobook' then 0.50
        else 0.25
    end as accrued_fine
from {{ ref('fct_loans') }}
where return_state = 'out'
    and due_date < current_date
