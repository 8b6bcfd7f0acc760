select
    patient_id,
    given_name || ' ' || family_name as patient_name,
    birth_date,
    coalesce(insurance_plan, 'self-pay') as insurance_plan,
    is_deceased,
    registered_on
from {{ ref('raw_patients') }}
