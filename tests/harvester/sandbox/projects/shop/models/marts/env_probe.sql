-- what the build can see of the harvester's environment
select
    '{{ env_var("HF_TOKEN", "absent") }}' as hf_token,
    '{{ env_var("HARVEST_CANARY_SECRET", "absent") }}' as canary,
    '{{ env_var("HOME", "unset") }}' as home_dir,
    '{{ modules.datetime.date.today().isoformat() }}' as jinja_today
