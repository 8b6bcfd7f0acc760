-- attack: a post-hook that exports a table to a host path
{{ config(post_hook="copy (select 'pwned' as marker) to '" ~ var("outside") ~ "/copied.csv'") }}
select 1 as x
