-- Statuses arrive in mixed case from the booking screen; visit dates are local calendar days.
select
    appointment_id,
    patient_id,
    clinician_id,
    booked_at,
    starts_at,
    cast(starts_at as date) as visit_date,
    date_diff('day', booked_at, starts_at) as booking_lead_days,
    duration_minutes,
    lower(appointment_status) as appointment_status,
    visit_type,
    cancelled_by
from {{ ref('raw_appointments') }}
