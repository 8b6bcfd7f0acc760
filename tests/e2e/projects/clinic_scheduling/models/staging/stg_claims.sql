select
    claim_id,
    appointment_id,
    billed_amount,
    paid_amount,
    lower(claim_status) as claim_status
from {{ ref('raw_claims') }}
