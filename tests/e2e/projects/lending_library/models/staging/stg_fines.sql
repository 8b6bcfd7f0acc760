select
    fine_id,
    loan_id,
    fine_amount,
    assessed_on,
    lower(fine_status) as fine_status,
    paid_on
from {{ ref('raw_fines') }}
