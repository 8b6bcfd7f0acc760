-- Card holders with tidy names; tier spellings vary by desk, so they are lower-cased here.
select
    member_id,
    first_name || ' ' || last_name as member_name,
    home_branch_id,
    joined_on,
    lower(membership_tier) as membership_tier,
    coalesce(is_staff, false) as is_staff,
    coalesce(newsletter_opt_in, false) as is_newsletter_subscriber
from {{ ref('raw_members') }}
